package admin

import (
	"net/http"
	"slices"
)

// databasesJSON is GET /api/v1/databases: the databases of a fleet whose
// admin pages sit side by side, and which one this server shows.
type databasesJSON struct {
	Current   string   `json:"current"`
	Databases []string `json:"databases"`
}

// databases answers GET /api/v1/databases; 404 unless Config.Databases
// is set.
func (s *Server) databases(w http.ResponseWriter, _ *http.Request, _ string) {
	if s.listDatabases == nil {
		writeError(w, http.StatusNotFound, "this server shows one database")
		return
	}
	names := slices.Clone(s.listDatabases())
	slices.Sort(names)
	writeJSON(w, http.StatusOK, databasesJSON{Current: s.database, Databases: names})
}
