package sqlite

// UnpreparedInTx is how many statements b ran unprepared inside a
// transaction through the helpers of prepared.go.
func UnpreparedInTx(b *Backend) int64 { return b.unpreparedInTx.Load() }
