package launcher

import (
	"regexp"
	"strconv"
	"testing"
)

// TestBootExitCodesMatch: boot.py's EXIT_* constants and boot.go's bootExit* ones
// are the same statuses.
func TestBootExitCodesMatch(t *testing.T) {
	want := map[string]int{"EXIT_OK": bootExitOK, "EXIT_USAGE": bootExitUsage, "EXIT_FAILED": bootExitFailed}
	got := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^(EXIT_[A-Z_]+) = (\d+)\b`).FindAllStringSubmatch(bootSource, -1) {
		n, err := strconv.Atoi(m[2])
		if err != nil {
			t.Fatal(err)
		}
		got[m[1]] = n
	}
	if len(got) != len(want) {
		t.Errorf("boot.py defines %v, want exactly %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("boot.py %s = %d, boot.go has %d", k, got[k], v)
		}
	}
}
