package chrome

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// devtools is one connection to Chromium's DevTools protocol over the pipe
// that --remote-debugging-pipe opens: Chromium reads commands on its fd 3
// and writes replies and events on its fd 4, each message one JSON object
// followed by a NUL byte. No port is opened, so nothing else on the host
// can drive the browser.
type devtools struct {
	wmu sync.Mutex // one message at a time on the pipe
	w   io.Writer

	mu      sync.Mutex
	next    int
	pending map[int]chan reply
	closed  error // why the read side ended; set once
	onEvent func(method, session string, params json.RawMessage)
}

type reply struct {
	Result json.RawMessage
	Err    error
}

type message struct {
	ID        int             `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// newDevtools starts reading r; onEvent is called, on the reading
// goroutine, for every event.
func newDevtools(w io.Writer, r io.Reader, onEvent func(method, session string, params json.RawMessage)) *devtools {
	d := &devtools{w: w, pending: map[int]chan reply{}, onEvent: onEvent}
	go d.read(bufio.NewReaderSize(r, 1<<20))
	return d
}

func (d *devtools) read(r *bufio.Reader) {
	for {
		b, err := r.ReadBytes(0)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("chromium closed its DevTools pipe")
			}
			d.fail(err)
			return
		}
		var m message
		if err := json.Unmarshal(b[:len(b)-1], &m); err != nil {
			d.fail(fmt.Errorf("unreadable DevTools message: %w", err))
			return
		}
		if m.ID == 0 {
			d.onEvent(m.Method, m.SessionID, m.Params)
			continue
		}
		d.mu.Lock()
		ch := d.pending[m.ID]
		delete(d.pending, m.ID)
		d.mu.Unlock()
		if ch == nil {
			continue
		}
		if m.Error != nil {
			ch <- reply{Err: fmt.Errorf("%s (DevTools error %d)", m.Error.Message, m.Error.Code)}
		} else {
			ch <- reply{Result: m.Result}
		}
	}
}

// fail ends every call waiting for a reply, and every later one, with err.
func (d *devtools) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = err
	for id, ch := range d.pending {
		ch <- reply{Err: err}
		delete(d.pending, id)
	}
}

// call sends method with params on session ("" for the browser) and
// decodes its result into out (nil: ignored).
func (d *devtools) call(ctx context.Context, session, method string, params, out any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	ch := make(chan reply, 1)
	d.mu.Lock()
	if d.closed != nil {
		d.mu.Unlock()
		return fmt.Errorf("%s: %w", method, d.closed)
	}
	d.next++
	id := d.next
	d.pending[id] = ch
	d.mu.Unlock()
	b, err := json.Marshal(message{ID: id, Method: method, SessionID: session, Params: p})
	if err == nil {
		d.wmu.Lock()
		_, err = d.w.Write(append(b, 0))
		d.wmu.Unlock()
	}
	if err != nil {
		d.mu.Lock()
		delete(d.pending, id)
		d.mu.Unlock()
		return fmt.Errorf("%s: send: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.Err != nil {
			return fmt.Errorf("%s: %w", method, r.Err)
		}
		if out != nil {
			if err := json.Unmarshal(r.Result, out); err != nil {
				return fmt.Errorf("%s: decode result: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}
