package sqlite

import "errors"

var errNotYet = errors.New("not yet implemented")
