package model

import (
	"fmt"
	"slices"
)

// A crawl's robots.txt policies (`submit --robots`, config crawl.robots).
const (
	// RobotsObey: a page whose URL the site's robots.txt disallows for
	// the crawl's user agent is not fetched (internal/robots).
	RobotsObey = "obey"
	// RobotsIgnore: robots.txt is not consulted (ArchiveBot's behaviour).
	RobotsIgnore = "ignore"
)

// RobotsPolicies lists every robots.txt policy.
var RobotsPolicies = []string{RobotsObey, RobotsIgnore}

// ValidateRobots checks a robots.txt policy value.
func ValidateRobots(policy string) error {
	if !slices.Contains(RobotsPolicies, policy) {
		return fmt.Errorf("robots %q: must be %s or %s", policy, RobotsObey, RobotsIgnore)
	}
	return nil
}
