package main

import (
	"flag"
	"fmt"

	"lbdns/configs"
	"lbdns/control"
)

// checkResult is check-config's -o json output.
type checkResult struct {
	Valid    bool              `json:"valid"`
	Summary  string            `json:"summary"`
	Problems []control.Problem `json:"problems"`
	// Warnings are a valid file's keys without effect
	// (configs.Config.Warnings).
	Warnings []control.Problem `json:"warnings"`
}

// checkConfigCmd validates a configuration file offline with the daemon's
// own loader: a valid file prints its summary (and every warning, one
// per line, "warning: " first, on stderr), an invalid one every problem
// (one per line, on stderr) and exits 1.
func checkConfigCmd(*flag.FlagSet) action {
	return func(e *env, args []string) error {
		if err := wantArgs(args, "FILE"); err != nil {
			return err
		}
		res := checkConfig(args[0])
		if e.json() {
			if err := e.writeJSON(res); err != nil {
				return err
			}
		} else if res.Valid {
			for _, w := range res.Warnings {
				fmt.Fprintln(e.stderr, "warning: "+w.Text)
			}
			fmt.Fprintln(e.stdout, res.Summary)
		} else {
			for _, p := range res.Problems {
				fmt.Fprintln(e.stderr, p.Text)
			}
		}
		if !res.Valid {
			return &exitError{code: exitRefused}
		}
		return nil
	}
}

// checkConfig loads the file at path and reports the outcome; an error
// that is not about the content (an unreadable file) is one problem.
func checkConfig(path string) checkResult {
	cfg, err := configs.Load(path)
	if err == nil {
		return checkResult{Valid: true, Summary: cfg.Summary(), Problems: []control.Problem{}, Warnings: problemsOf(cfg.Warnings)}
	}
	ps := configs.Problems(err)
	if len(ps) == 0 {
		return checkResult{Problems: []control.Problem{{File: path, Message: err.Error(), Text: err.Error()}}, Warnings: []control.Problem{}}
	}
	return checkResult{Problems: problemsOf(ps), Warnings: []control.Problem{}}
}

// problemsOf is ps as the control API says them (never nil).
func problemsOf(ps []configs.Problem) []control.Problem {
	out := make([]control.Problem, len(ps))
	for i, p := range ps {
		out[i] = control.Problem{File: p.File, Line: p.Line, Key: p.Key, Value: p.Value, Message: p.Msg, Text: p.Error()}
	}
	return out
}
