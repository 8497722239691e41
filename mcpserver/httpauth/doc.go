// Package httpauth is the door of mcp-exec's HTTP and SSE transports: a
// middleware that lets a request through only with a valid credential, and the
// OAuth 2.0 protected-resource metadata (RFC 9728) that tells clients where to
// get one.
//
// Two kinds of credential, either or both configured:
//
//   - a static token, sent as "X-MCP-AUTH: <token>" or "Authorization: Bearer
//     <token>", compared in constant time;
//   - an OAuth access token (opt-in): a JWT signed by the configured issuer with
//     an asymmetric key from its JWKS, whose type (typ at+jwt, JWT or none),
//     issuer, audience, expiry, not-before and scopes are checked. The
//     algorithm is pinned to RS/PS/ES/EdDSA; "none" and HMAC are refused
//     whatever the key set holds.
//
// Invariants:
//
//   - The middleware decides from the headers alone: a refused request's body is
//     never read, so it composes with a body-size limit placed before or after it.
//   - A refusal says nothing about why: 401 with "Unauthorized" and a
//     WWW-Authenticate: Bearer challenge (naming the resource metadata when OAuth
//     is on, and error="invalid_token" when a credential was presented). The one
//     exception is a valid JWT that lacks a required scope: 403 with
//     error="insufficient_scope" and the scopes, as RFC 6750 and the MCP
//     authorization spec ask, so that a client can step up.
//   - Two credentials in one request must agree: an X-MCP-AUTH and a Bearer
//     token that differ, or a header given twice, is a 401.
//   - Tokens never reach a log or an error message.
//   - Keys come only from the configured issuer's origin: a fetch follows no
//     redirect to another scheme, host or port. No lock is held across a fetch,
//     so a slow issuer delays only tokens whose key is not known yet; such
//     fetches are shared and start at most once per MinRefreshInterval. Keys
//     not confirmed by a successful fetch for MaxKeyAge are not used (every
//     JWT is refused until a fetch succeeds).
package httpauth
