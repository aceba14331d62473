"""Pages for people in a browser: the review page, sign-in, and linking a chat account.

Server-rendered HTML (autoescaped templates) over the same services as the API. A browser is
signed in by a session cookie (HttpOnly, SameSite=Lax, Secure on an https site); every form
carries the session's CSRF token and is refused from another origin.
"""
