package configs

import "fmt"

// poolCheckKindOK reports whether a resolver pool ([[pool]]) may use check
// k: resolver pools need DNS answers, so only checks of kind "dns"; the
// other kinds are for GSLB members. An unknown kind is reported at the
// check itself.
func poolCheckKindOK(k *Check) bool {
	return k == nil || k.Kind == "dns" || !oneOf(k.Kind, CheckKinds())
}

// poolCheckKindMsg says why a resolver pool may not use check k.
func poolCheckKindMsg(k *Check) string {
	return fmt.Sprintf("resolver pools need a dns check; %s checks are for GSLB members", k.Kind)
}
