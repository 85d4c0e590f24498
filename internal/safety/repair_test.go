package safety

func repairer() Repairer { return Fsck{} }
