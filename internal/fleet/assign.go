package fleet

import (
	"hash/fnv"
	"slices"
)

// Owner is the member that serves database name among members, by
// rendezvous hashing: the member with the highest hash of (member, name).
// Every member that sees the same members computes the same owner, and
// removing a member moves only the databases it owned. "" when there are
// no members.
func Owner(name string, members []string) string {
	var best string
	var bestScore uint64
	for _, m := range members {
		h := fnv.New64a()
		h.Write([]byte(m))
		h.Write([]byte{0})
		h.Write([]byte(name))
		score := mix(h.Sum64())
		if best == "" || score > bestScore || (score == bestScore && m < best) {
			best, bestScore = m, score
		}
	}
	return best
}

// mix spreads FNV's output over the whole range (splitmix64's finalizer),
// so that similar names and ids do not favour one member.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Assigned is the databases of dbs that self serves among members.
func Assigned(self string, members []string, dbs []Database) []Database {
	var out []Database
	if !slices.Contains(members, self) {
		return nil
	}
	for _, db := range dbs {
		if Owner(db.Name, members) == self {
			out = append(out, db)
		}
	}
	return out
}
