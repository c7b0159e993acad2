package fleet

import (
	"context"
	"fmt"
	"sync"

	"github.com/txoutbox/outbox/internal/store"
)

// Listed is a database of the list an application gives its member
// (outbox.FleetDatabase, which documents the fields).
type Listed struct {
	Name    string
	Version string
	Open    func(ctx context.Context) (b *store.Backend, closeFn func(), err error)
}

// Databases is the list of databases an application gives its member,
// with how to connect to each: its Open is Relays.Open.
type Databases struct {
	mu   sync.Mutex
	open map[string]func(ctx context.Context) (*store.Backend, func(), error)
}

// Set checks dbs and makes it the list, and returns it as the supervisor
// takes it (Supervisor.SetList). Names must be unique and every database
// needs Open.
func (d *Databases) Set(dbs []Listed) ([]Database, error) {
	list := make([]Database, len(dbs))
	open := make(map[string]func(ctx context.Context) (*store.Backend, func(), error), len(dbs))
	for i, db := range dbs {
		switch {
		case db.Name == "":
			return nil, fmt.Errorf("outbox: SetDatabases: database %d has no name", i)
		case db.Open == nil:
			return nil, fmt.Errorf("outbox: SetDatabases: database %q has no Open", db.Name)
		}
		if _, dup := open[db.Name]; dup {
			return nil, fmt.Errorf("outbox: SetDatabases: database %q is listed twice", db.Name)
		}
		open[db.Name] = db.Open
		list[i] = Database{Name: db.Name, URL: db.Version}
	}
	d.mu.Lock()
	d.open = open
	d.mu.Unlock()
	return list, nil
}

// Open connects to the database named name for the member, unless it
// has left the list since (ok false).
func (d *Databases) Open(ctx context.Context, name string) (b *store.Backend, closeFn func(), ok bool, err error) {
	d.mu.Lock()
	open, ok := d.open[name]
	d.mu.Unlock()
	if !ok {
		return nil, nil, false, nil
	}
	b, closeFn, err = open(ctx)
	return b, closeFn, true, err
}
