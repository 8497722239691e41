package launcher

import (
	"errors"
	"fmt"
	"testing"
)

// A GoneError is ErrSessionGone to errors.Is, gives its why to errors.As through any
// wrapping, and reads as the sentinel's text with the why after it.
func TestGoneError(t *testing.T) {
	err := fmt.Errorf("session call: %w", &GoneError{Why: "closed by session_close"})
	if !errors.Is(err, ErrSessionGone) {
		t.Fatalf("errors.Is(%v, ErrSessionGone) = false", err)
	}
	var gone *GoneError
	if !errors.As(err, &gone) || gone.Why != "closed by session_close" {
		t.Fatalf("errors.As: %v, %+v", errors.As(err, &gone), gone)
	}
	if want := "session call: " + ErrSessionGone.Error() + ": closed by session_close"; err.Error() != want {
		t.Errorf("text %q, want %q", err.Error(), want)
	}
	if errors.As(ErrSessionGone, &gone) {
		t.Error("the bare sentinel is a GoneError")
	}
}
