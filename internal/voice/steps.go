package voice

// PreviewNextStep is the next_step of a preview. writesOn says whether
// writes are enabled now; unknownMode is as for Instructions.
func (v *Voice) PreviewNextStep(writesOn bool, unknownMode string) string {
	switch {
	case !writesOn:
		return "Show this diff to the user. " + v.writesOffNow(unknownMode) + " This preview stays valid until expires_at."
	case v.mode == User:
		return "Show this diff to the user, then call " + v.Tool("apply_change") + " with change_id; their client asks them to approve it."
	}
	return "Show this diff to the user and wait. Only if they approve it, call " + v.Tool("apply_change") + " with change_id and confirmation_token."
}
