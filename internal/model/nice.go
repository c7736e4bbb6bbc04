package model

import "fmt"

// A job's niceness, mnbot's priority: lower runs first (-20..19, 0 by
// default). It is stored in the job's hash (`nice`) and maps to the
// Temporal priority key of the job's workflow, which every task the job
// schedules inherits (PriorityKey).
const (
	MinNice = -20
	MaxNice = 19
)

// ValidateNice checks a nice value's range.
func ValidateNice(nice int) error {
	if nice < MinNice || nice > MaxNice {
		return fmt.Errorf("nice %d: must be between %d and %d (lower runs first)", nice, MinNice, MaxNice)
	}
	return nil
}

// PriorityKey maps a valid nice value to Temporal's priority key 1..5
// (1 = highest; 3 = Temporal's default): <= -10 → 1, -9..-1 → 2, 0 → 3,
// 1..9 → 4, >= 10 → 5.
func PriorityKey(nice int) int {
	switch {
	case nice <= -10:
		return 1
	case nice < 0:
		return 2
	case nice == 0:
		return 3
	case nice < 10:
		return 4
	default:
		return 5
	}
}
