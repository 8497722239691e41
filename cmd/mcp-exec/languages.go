package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/cmd/mcp-exec/internal/config"
	"github.com/mcp-exec/mcp-exec/launcher"
)

// checkLanguages runs a program in each configured language besides Python
// (launcher.CheckLanguages): exec's schema lists the languages of --languages, and a
// server whose image cannot run one of them refuses to start, naming the setting,
// rather than fail every call in it.
func checkLanguages(ctx context.Context, cfg config.Config, l *launcher.Launcher, log zerolog.Logger) error {
	langs := config.SplitList(cfg.Languages)
	if len(langs) <= 1 {
		return nil
	}
	// Cold sandboxes, under gVisor on a loaded machine seconds each.
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	t0 := time.Now()
	versions, err := l.CheckLanguages(ctx, langs)
	if errors.Is(err, launcher.ErrPrestartMissing) {
		return fmt.Errorf("%w; rebuild the image from this version's images/python-sandbox, or leave javascript out of %s", err, config.Name("pool-prestart"))
	}
	if err != nil {
		return fmt.Errorf("%w; install what is missing in the image, or leave the language out of %s", err, config.Name("languages"))
	}
	log.Info().Strs("languages", langs).Interface("versions", versions).
		Int64("duration_ms", time.Since(t0).Milliseconds()).Msg("languages checked: a program ran in each")
	return nil
}
