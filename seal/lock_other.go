//go:build !unix

package seal

import "sync"

var fileLock sync.Mutex

// lockFile serializes changes within the process: other systems than
// Unix have no advisory lock here.
func lockFile(string) (func(), error) {
	fileLock.Lock()
	return fileLock.Unlock, nil
}
