// Package ipvsbench measures the vip Reconciler against the real kernel
// inside the IPVS test VM, next to ipvsadm restoring the same table in the
// same run. It has no code of its own; run it with
//
//	scripts/ipvs-vm.sh ./bench/ipvs -test.v
package ipvsbench
