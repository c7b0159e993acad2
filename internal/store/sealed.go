package store

import "strings"

// sealKeyHeader is the header naming the key a sealed payload is sealed
// under (seal.HeaderKeyID).
const sealKeyHeader = "outbox-seal-key"

// claimCheckHeader is the header of a claim-checked message's blob
// reference (claimcheck.HeaderRef).
const claimCheckHeader = "outbox-claim-check"

// sealKeyExpr is the SQL text of a row's sealed-payload key id, NULL when
// the row names none (or its headers are not JSON, which MySQL and SQLite
// do not check on rows written before schema version 17).
func sealKeyExpr(dl dialect) string { return headerExpr(dl, sealKeyHeader) }

// headerExpr is the SQL text of a row's header name (a constant of this
// package), NULL when the row has none or its headers are not JSON.
func headerExpr(dl dialect, name string) string {
	path := `'$."` + name + `"'`
	switch dl.(type) {
	case postgres:
		return "(headers->>'" + name + "')"
	case mysql:
		return "(CASE WHEN JSON_VALID(headers) THEN JSON_UNQUOTE(JSON_EXTRACT(headers, " + path + ")) END)"
	}
	return "(CASE WHEN json_valid(headers) THEN json_extract(headers, " + path + ") END)"
}

// labelledHeaders is the SQL text of the headers of a row whose payload
// is sealed or kept in a claim-check store, empty for any other row: a
// search returns them so that its lists can say "sealed, key K" or
// "claim check: …" in place of a preview.
func labelledHeaders(dl dialect) string {
	return "CASE WHEN " + sealKeyExpr(dl) + " IS NOT NULL OR " + headerExpr(dl, claimCheckHeader) +
		" IS NOT NULL THEN " + dl.text("headers") + " ELSE '' END"
}

// addNotSealedUnder adds "the row's payload is not sealed under any of
// keys".
func (c *cond) addNotSealedUnder(keys []string) {
	args := make([]any, len(keys))
	for i, k := range keys {
		args[i] = k
	}
	c.add("COALESCE("+sealKeyExpr(c.dl)+", '') NOT IN ("+strings.TrimSuffix(strings.Repeat("{}, ", len(keys)), ", ")+")", args...)
}
