package upstream

import (
	"reflect"
	"testing"
)

// TestGroup: records are counted by server, tool and status, in the order each group
// first appears, with their durations and sizes summed.
func TestGroup(t *testing.T) {
	got := Group([]CallRecord{
		{Server: "a", Tool: "x", Status: "ok", DurationMS: 1, ArgBytes: 10, ResultBytes: 100},
		{Server: "b", Tool: "x", Status: "ok", DurationMS: 2, ArgBytes: 20, ResultBytes: 200},
		{Server: "a", Tool: "x", Status: "ok", DurationMS: 3, ArgBytes: 30, ResultBytes: 300},
		{Server: "a", Tool: "x", Status: "denied", ArgBytes: 5},
	})
	want := []CallGroup{
		{Server: "a", Tool: "x", Status: "ok", Count: 2, DurationMS: 4, ArgBytes: 40, ResultBytes: 400},
		{Server: "b", Tool: "x", Status: "ok", Count: 1, DurationMS: 2, ArgBytes: 20, ResultBytes: 200},
		{Server: "a", Tool: "x", Status: "denied", Count: 1, ArgBytes: 5},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Group:\n got %+v\nwant %+v", got, want)
	}
	if g := Group(nil); g == nil || len(g) != 0 {
		t.Errorf("Group(nil) = %#v, want an empty slice", g)
	}
}
