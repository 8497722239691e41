package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/engine"
)

// seccompOption is what follows "seccomp=" in SecurityOpt. Docker takes the profile
// itself; Podman's compat API (4.x, 5.x: podman#27710) opens the value as a file on
// the engine's host, so for Podman it is the path of a file holding the profile.
// Under gVisor (runtime, backend.GVisor) the profile is gvisorSeccompJSON.
func (b *Backend) seccompOption(ctx context.Context, runtime string) (string, error) {
	b.secMu.Lock()
	defer b.secMu.Unlock()
	gvisor, i := backend.GVisor(runtime), 0
	if gvisor {
		i = 1
	}
	if opt := b.secOpt[i]; opt != "" {
		return opt, nil
	}
	profile, err := seccompJSON()
	if gvisor {
		profile, err = gvisorSeccompJSON()
	}
	if err != nil {
		return "", err
	}
	info, err := engine.Identify(ctx, b.cli)
	if err != nil {
		return "", fmt.Errorf("identifying engine: %w", b.classify(err))
	}
	if !info.IsPodman() {
		b.secOpt[i] = profile
		return profile, nil
	}
	b.podman = true
	path, err := writeSeccompFile(profile)
	if err != nil {
		return "", err
	}
	b.log.Info().Str("engine", info.String()).Str("seccomp_profile", path).Msg("podman reads the seccomp profile from a file")
	b.secOpt[i] = path
	return path, nil
}

// writeSeccompFile stores profile in a file named by its hash, in a directory only
// this user can write, and returns its path.
func writeSeccompFile(profile string) (string, error) {
	// root: /run/mcp-exec; others: $XDG_RUNTIME_DIR/mcp-exec (a rootless Podman runs
	// as the same user), else the user's cache directory.
	dir := "/run/mcp-exec"
	if os.Geteuid() != 0 {
		base := os.Getenv("XDG_RUNTIME_DIR")
		if base == "" {
			c, err := os.UserCacheDir()
			if err != nil {
				return "", fmt.Errorf("seccomp profile directory: %w", err)
			}
			base = c
		}
		dir = filepath.Join(base, "mcp-exec")
	}
	// World-readable, writable only by us: a rootless Podman running as another user
	// must read the profile; nobody else may change it.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("seccomp profile directory: %w", err)
	}
	_ = os.Chmod(dir, 0o755)
	st, err := os.Lstat(dir)
	if err != nil || !st.IsDir() || st.Mode().Perm()&0o022 != 0 || st.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()) {
		return "", fmt.Errorf("seccomp profile directory %s: not a directory of ours that only we can write", dir)
	}
	sum := sha256.Sum256([]byte(profile))
	path := filepath.Join(dir, "seccomp-"+hex.EncodeToString(sum[:8])+".json")
	if b, err := os.ReadFile(path); err == nil && string(b) == profile {
		return path, nil
	}
	tmp, err := os.CreateTemp(dir, "seccomp-*.tmp")
	if err != nil {
		return "", fmt.Errorf("writing seccomp profile: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(profile); err != nil {
		tmp.Close()
		return "", fmt.Errorf("writing seccomp profile: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("writing seccomp profile: %w", err)
	}
	return path, nil
}
