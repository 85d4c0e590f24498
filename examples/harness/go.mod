module example.com/harness

go 1.26.8

require github.com/leasetool/lease v0.0.0

require (
	github.com/BurntSushi/toml v1.6.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

// The lease repository is not published at its module path: a harness
// takes it from a clone (here, the repository this example sits in).
replace github.com/leasetool/lease => ../..
