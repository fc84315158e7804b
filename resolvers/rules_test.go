package resolvers

import (
	"reflect"
	"testing"

	"lbdns/intent"
)

func TestRulesFrom(t *testing.T) {
	got := RulesFrom([]intent.Override{
		{Resolver: "a", Action: intent.ActionDrain, Reason: "r"},
		{Resolver: "a", Pool: "p", Action: intent.ActionDisable},
		{Resolver: "b", VIP: "v", Action: intent.ActionDrain},
	})
	want := []Rule{
		{Resolver: "a", Override: Drain},
		{Resolver: "a", Pool: "p", Override: Disable},
		{Resolver: "b", VIP: "v", Override: Drain},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RulesFrom = %+v, want %+v", got, want)
	}
	if got := RulesFrom(nil); got == nil || len(got) != 0 {
		t.Errorf("RulesFrom(nil) = %#v, want empty", got)
	}
}
