package commands

// LaunchPolicyOf names the policy of command name under a launcher
// ("distributed", "once", "alone"); ok is false when it has none.
func LaunchPolicyOf(name string) (policy string, ok bool) {
	d := descriptorOf(name)
	if d == nil || d.Launch == launchUnset {
		return "", false
	}
	return d.Launch.String(), true
}

// Register registers d as a command's file does, for one test, and returns
// the function that removes it again.
func Register(d *Descriptor) (remove func()) {
	register(d)
	return func() { delete(descriptors, d.Command.Name) }
}
