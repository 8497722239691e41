// Package httpauth is the door of mcp-exec's HTTP and SSE transports: a middleware
// that lets a request through only with a valid credential, and the OAuth 2.0
// protected-resource metadata (RFC 9728) that tells clients where to get one. The
// credential is a static token (X-MCP-AUTH or Authorization: Bearer, compared in
// constant time, the server holding it or its SHA-256), a JWT access token from the
// configured issuer (Options.OAuth), or either.
//
// Invariants:
//
//   - The middleware decides from the headers alone: a refused request's body is never
//     read, so it composes with a body-size limit before or after it.
//   - A refusal says nothing about why: 401 with a bare Bearer challenge; the one
//     exception is a valid JWT without a required scope (403, insufficient_scope, so
//     that a client can step up). Two credentials in one request must agree.
//   - A JWT is signed with an asymmetric key ("none" and HMAC are refused whatever
//     the key set holds), fetched from the issuer's origin only, and not trusted once
//     no fetch has confirmed it for MaxKeyAge.
//   - Tokens never reach a log or an error message.
//
// The checks and refusals in full: docs/transports-and-auth.md, "OAuth".
package httpauth
