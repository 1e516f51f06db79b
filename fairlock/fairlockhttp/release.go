package fairlockhttp

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"

	"github.com/fairlock/fairlock/fairlock"
)

// TokenHeader carries the Handler's release token, which its page reads
// from itself: a page of another site can neither read it nor, without a
// CORS preflight that the Handler never grants, send it.
const TokenHeader = "X-Fairlock-Token"

// releaseJSON is what a forced release did.
type releaseJSON struct {
	Ended   []string    `json:"ended"`
	Granted []grantJSON `json:"granted"`
}

type grantJSON struct {
	Token string `json:"token"`
	Fence int64  `json:"fence"`
}

// serveRelease ends one holder's lease, when the Handler allows it and the
// request is the page's own, confirmed.
func (h *Handler) serveRelease(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeJSON(w, http.StatusMethodNotAllowed, errorJSON{"a release is a POST"})
		return
	}
	if refused := h.refuse(r); refused != "" {
		writeJSON(w, http.StatusForbidden, errorJSON{refused})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, errorJSON{"the form could not be read: " + err.Error()})
		return
	}
	kind, name, token := kindNamed(r.PostForm.Get("kind")), r.PostForm.Get("name"), r.PostForm.Get("token")
	switch {
	case r.PostForm.Get("confirm") != "yes":
		writeJSON(w, http.StatusBadRequest, errorJSON{"not confirmed (confirm=yes): nothing changed"})
		return
	case kind == 0 || name == "" || token == "":
		writeJSON(w, http.StatusBadRequest, errorJSON{"a release names the lock's kind and name and the holder's token"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	res, err := h.locker.ForceRelease(ctx, kind, name, token)
	switch {
	case errors.Is(err, fairlock.ErrNotHeld):
		writeJSON(w, http.StatusConflict, errorJSON{fmt.Sprintf("%s no longer holds the %s %s (released, expired or ended meanwhile): nothing changed",
			token, kind, name)})
		return
	case errors.Is(err, fairlock.ErrInvalid):
		writeJSON(w, http.StatusBadRequest, errorJSON{explain(err)})
		return
	case err != nil:
		writeJSON(w, http.StatusServiceUnavailable, errorJSON{explain(err)})
		return
	}
	out := releaseJSON{Ended: res.Ended, Granted: []grantJSON{}}
	for _, g := range res.Granted {
		out.Granted = append(out.Granted, grantJSON{g.Token, g.Fence})
	}
	writeJSON(w, http.StatusOK, out)
}

// refuse says why a release request is refused, or "": the Handler was
// built without WithForceRelease, the request comes from another site, or
// it lacks the Handler's token.
func (h *Handler) refuse(r *http.Request) string {
	if !h.force {
		return "force release is off: the handler is read-only (fairlockhttp.WithForceRelease, fairlock serve -force-release)"
	}
	if err := h.origins.Check(r); err != nil {
		return "refused: a request from another site (" + err.Error() + ")"
	}
	if subtle.ConstantTimeCompare([]byte(r.Header.Get(TokenHeader)), []byte(h.token)) != 1 {
		return "refused: the request lacks this page's " + TokenHeader + "; reload the page"
	}
	return ""
}
