package vip

// Hooks for the external tests (package vip_test). Those can import
// lbdns/testkit/vipfake, which imports vip and so cannot be imported by
// this package's own test files.

// NewTestReconciler returns a reconciler whose waits are recorded instead
// of slept.
var NewTestReconciler = newTestReconciler

// Helpers shared with the internal tests.
var (
	DesiredTable = desiredTable
	TablesEqual  = tablesEqual
	OpStrings    = opStrings
	Fill         = fill
	Dest         = dest
	Svc          = svc
	TableOf      = table
	KeyU, KeyT   = kU, kT
	KeyX         = kX
)

// NewFailKindClient returns a Client over c whose calls of method fail with
// err until heal is called.
func NewFailKindClient(c Client, method string, err error) (f Client, heal func()) {
	fc := &faultClient{Client: c, failKind: map[string]error{method: err}}
	return fc, func() {
		fc.mu.Lock()
		defer fc.mu.Unlock()
		delete(fc.failKind, method)
	}
}
