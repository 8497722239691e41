package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/mcp-exec/mcp-exec/cmd/mcp-exec/internal/config"
	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/mcpserver"
)

// runOnce is `mcp-exec run FILE`: one program in language (one of --languages, checked
// by runCmd) through the same launcher as the tool, for people and scripts. The program's stdout and stderr go to ours; a summary line
// goes to stderr; the exit status is the program's. With --json the tool's own
// structured result (mcpserver.Structured, files listed) is printed on stdout instead.
func runOnce(ctx context.Context, l *launcher.Launcher, cfg config.Config, args []string, language string, jsonOut bool, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: mcp-exec run [flags] [--json] [--language L] FILE|-")
		return 2
	}
	code, err := readCode(args[0], stdin, cfg.MaxCodeBytes)
	if err != nil {
		fmt.Fprintf(stderr, "mcp-exec: %v\n", err)
		return 2
	}
	res, err := l.Run(ctx, launcher.Job{Code: code, Timeout: cfg.DefaultTimeout, Language: language})
	if err != nil {
		fmt.Fprintf(stderr, "mcp-exec: %s\n", backend.Spell(err, config.Var))
		return 1
	}
	if jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(mcpserver.Structured(res)); err != nil {
			return 1
		}
		return 0
	}
	io.WriteString(stdout, res.Stdout)
	io.WriteString(stderr, res.Stderr)
	fmt.Fprintf(stderr, "[mcp-exec] exit_code=%d duration_ms=%d truncated=%t timed_out=%t oom_killed=%t\n",
		res.ExitCode, res.Duration.Milliseconds(), res.Truncated, res.TimedOut, res.OOMKilled)
	return min(res.ExitCode, 255)
}

func readCode(name string, stdin io.Reader, limit int64) (string, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return "", fmt.Errorf("reading program: %w", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return "", fmt.Errorf("reading program: %w", err)
	}
	if int64(len(b)) > limit {
		return "", fmt.Errorf("program is over %d bytes (--max-code-bytes, MCP_EXEC_MAX_CODE_BYTES)", limit)
	}
	return string(b), nil
}
