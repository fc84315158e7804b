package intent_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"lbdns/configs"
	"lbdns/intent"
)

// view is a daemon whose plan never loses or adds a taker.
type view struct{ cfg *configs.Config }

func (v view) Config() *configs.Config                                { return v.cfg }
func (v view) Impact(before, after intent.State) ([]string, []string) { return nil, nil }

// ExampleApply: decide, persist, and only then put the change in force.
func ExampleApply() {
	cfg := &configs.Config{
		Pools:     []configs.Pool{{Name: "main", Members: []string{"bind-1", "unbound-1"}}},
		Resolvers: []configs.Resolver{{Name: "bind-1"}, {Name: "unbound-1"}},
	}
	dir, _ := os.MkdirTemp("", "intent")
	defer os.RemoveAll(dir)
	store := intent.NewFileStore(dir, intent.FileOptions{})
	ctx := context.Background()
	stored, _ := store.Load(ctx)
	cur := stored.State

	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	next, res, err := intent.Apply(cur, intent.Request{Action: intent.ActionDrain, Resolver: "bind-1", Pool: "main", Reason: "disk full", By: "uid 0", At: at}, view{cfg})
	if err != nil {
		fmt.Println("refused:", err)
		return
	}
	if _, err := store.Save(ctx, next, stored.Revision); err != nil {
		fmt.Println("not saved, nothing changed:", err)
		return
	}
	cur = next
	fmt.Println(res.Message)

	_, _, err = intent.Apply(cur, intent.Request{Action: intent.ActionDrain, Resolver: "bind-2"}, view{cfg})
	fmt.Println(err)
	// Output:
	// bind-1 drained in pool main
	// unknown resolver "bind-2" (did you mean "bind-1"?)
}
