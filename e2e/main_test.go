package e2e_test

import (
	"testing"

	"github.com/mcp-exec/mcp-exec/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m) }
