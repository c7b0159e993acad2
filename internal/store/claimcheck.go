package store

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"

	"github.com/txoutbox/outbox/claimcheck"
)

// ClaimRefs returns the claim-check references (the values of
// claimcheck.HeaderRef) that the rows of outbox_messages and of the
// archives (outbox_messages_archive, and on partitioned PostgreSQL the
// day partitions kept as outbox_messages_archive_YYYYMMDD) with the given
// message ids hold: the blobs the orphan sweep must keep. Ids that are no
// UUIDs match no row.
func (st *Store) ClaimRefs(ctx context.Context, ids []string) (map[string]bool, error) {
	valid := make([]string, 0, len(ids))
	for _, id := range ids {
		if validUUID(id) {
			valid = append(valid, strings.ToLower(id))
		}
	}
	refs := map[string]bool{}
	if len(valid) == 0 {
		return refs, nil
	}
	tables := []string{"outbox_messages", archiveTable}
	if st.d == Postgres {
		days, err := queryColumn[string](ctx, st.db, `SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE 'outbox\_messages\_archive\_%' ORDER BY tablename`)
		if err != nil {
			return nil, err
		}
		for _, d := range days {
			if dayArchive.MatchString(d) {
				tables = append(tables, d)
			}
		}
	}
	for _, table := range tables {
		c := &cond{dl: st.dl}
		c.addAll(st.dl.messageIDsIn(valid))
		hs, err := queryColumn[*string](ctx, st.db, "SELECT "+st.dl.text("headers")+" FROM "+table+" WHERE "+c.sql(), c.args...)
		if err != nil {
			return nil, err
		}
		for _, h := range hs {
			if h == nil || !strings.Contains(*h, claimcheck.HeaderRef) {
				continue
			}
			var m map[string]any
			if json.Unmarshal([]byte(*h), &m) != nil {
				continue
			}
			if v, ok := m[claimcheck.HeaderRef].(string); ok {
				refs[v] = true
			}
		}
	}
	return refs, nil
}

// dayArchive is the name of a day partition kept as an archive
// (ArchiveName).
var dayArchive = regexp.MustCompile(`^outbox_messages_archive_[0-9]{8}$`)
