package postgres

import (
	"strconv"
	"strings"
)

// RecordedVersions is what changeset_migrations of a current ledger
// records, as "1 2 …" in order: the version of every migration file, a
// number left out where the files leave it out.
func RecordedVersions() string {
	var vs []string
	for _, m := range migrations {
		vs = append(vs, strconv.Itoa(m.Version))
	}
	return strings.Join(vs, " ")
}
