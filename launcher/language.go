package launcher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// ErrLanguageMissing: the image cannot run a language the server is configured to
// offer (its interpreter or one of the tools the tool's description promises is
// missing, or it does not run as the bootstrap starts it).
var ErrLanguageMissing = errors.New("the sandbox image cannot run a configured language")

// ErrPrestartMissing: Options.Prestart names javascript, and the image's node was not
// started ahead for a warm-pool sandbox's call: its snapshot main
// (images/python-sandbox/node-main.js) cannot wait for its program, so boot.py starts
// node after the code, as if the setting were off.
var ErrPrestartMissing = errors.New("the sandbox image cannot start node ahead")

// languageChecks are the programs CheckLanguages runs, each in its own language: each
// prints "ok <version>" when what the tool's description promises is there.
var languageChecks = map[string]string{
	// The tools docs/languages.md lists for the shell.
	"bash": `for t in jq sqlite3 curl file gzip xz zip unzip awk sed grep; do command -v "$t" >/dev/null || missing="$missing $t"; done
if [ -n "$missing" ]; then echo "missing:$missing"; exit 1; fi
echo "ok $BASH_VERSION"`,
	// An ES module with top-level await: the syntax detection the bootstrap relies on.
	// "ahead": node's parent is not the bootstrap but the sandbox's child, which started
	// it before the code came (Options.Prestart).
	"javascript": `import { versions } from "node:process";
await null;
console.log("ok " + versions.node + (process.ppid === 1 ? "" : " ahead"));`,
	// The same through esbuild (the image's): a type, an interface, an import that is
	// only a type. The version is node's and esbuild's.
	"typescript": `import { versions } from "node:process";
import { execFileSync } from "node:child_process";
import type { Buffer } from "node:buffer";
interface Versions { node: string }
const v: Versions = { node: versions.node };
await null;
const esbuild: Buffer = execFileSync("esbuild", ["--version"]);
console.log("ok " + v.node + ", esbuild " + esbuild.toString().trim());`,
}

// CheckLanguages runs one sandbox per language of langs other than Python, each a
// program in that language (at once, as the slots allow), so that a server offering a
// language its image cannot run refuses to start rather than fail every call in it. It
// returns each language's interpreter version. Python needs no check: every sandbox's
// bootstrap is Python. With a warm pool and Options.Prestart naming javascript, the
// check's sandbox is a pooled one (the pool is not started yet), whose node must have
// been started ahead (ErrPrestartMissing).
func (l *Launcher) CheckLanguages(ctx context.Context, langs []string) (map[string]string, error) {
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		versions = map[string]string{}
		errs     []error
	)
	for _, lang := range langs {
		if lang == LanguagePython {
			continue
		}
		wg.Go(func() {
			v, err := l.checkLanguage(ctx, lang)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			versions[lang] = v
		})
	}
	wg.Wait()
	return versions, errors.Join(errs...)
}

func (l *Launcher) checkLanguage(ctx context.Context, lang string) (string, error) {
	code, ok := languageChecks[lang]
	if !ok || !slices.Contains(OtherLanguages, lang) {
		return "", fmt.Errorf("%w: %q", ErrLanguage, lang)
	}
	res, err := l.Run(ctx, Job{Language: lang, Code: code, Timeout: 30 * time.Second, internal: true})
	if err != nil {
		return "", fmt.Errorf("checking %s: %w", lang, err)
	}
	v, found := strings.CutPrefix(strings.TrimSpace(res.Stdout), "ok ")
	if res.ExitCode != 0 || !found {
		return "", fmt.Errorf("%w: %s in image %s: exit %d, stdout %q, stderr %q", ErrLanguageMissing, lang,
			l.opts.Image, res.ExitCode, truncate(res.Stdout, 200), truncate(res.Stderr, 300))
	}
	v, ahead := strings.CutSuffix(v, " ahead")
	if lang == "javascript" && l.pool != nil && slices.Contains(l.opts.Prestart, lang) && !ahead {
		return "", fmt.Errorf("%w: in image %s, node ran after the code in a warm-pool sandbox: its snapshot main (/usr/local/share/mcp-exec/node-main.js, images/python-sandbox) cannot wait for a program", ErrPrestartMissing, l.opts.Image)
	}
	return v, nil
}
