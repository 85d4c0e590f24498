package commands

// LaunchPolicy names the policy of command name under a launcher
// ("distributed", "once", "alone"); ok is false when it has none.
func LaunchPolicy(name string) (policy string, ok bool) {
	p, ok := launchPolicies[name]
	return [...]string{"distributed", "once", "alone"}[p], ok
}
