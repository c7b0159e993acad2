package store

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/txoutbox/outbox/claimcheck"
)

// ClaimRefs returns the claim-check references (the values of claimcheck.HeaderRef) that the rows of outbox_messages and
// outbox_messages_archive with the given message ids hold: the blobs the
// orphan sweep must keep. Ids that are no UUIDs match no row.
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
	for _, table := range []string{"outbox_messages", archiveTable} {
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
