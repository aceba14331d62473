"""Domain errors. Transports map them to what their users see, each in one place.

    DomainError
    ├── InvalidRequest          input the domain refuses (bad value, wrong combination)
    │   ├── ReviewClosed        the review no longer accepts decisions
    │   └── UnknownCode         a one-time code that is unknown, used or expired
    ├── Unauthenticated         no identity, or one that cannot be verified
    │   └── ChatUserNotLinked   a chat user no gateway user is linked to
    │       └── ChatEmailUnavailable  ...and the chat service would not say their e-mail
    ├── Forbidden               the caller may not do this
    │   ├── InactiveUser
    │   ├── AdminRequired
    │   ├── SelfApproval
    │   ├── NotAReviewer
    │   ├── NotForceApprover
    │   ├── OwnerOrAdminRequired
    │   ├── NotApproved
    │   └── OutsideTimeWindow
    ├── NotFound                no such resource (or not visible to the caller)
    ├── TooManyAttempts         too many failed attempts from one address or at one principal
    ├── Conflict                it already exists, or clashes with one that does
    ├── UnusableConfiguration   well-formed settings the plugin cannot run with
    ├── NotConfigured           the resource needs configuration before it can be used
    ├── LicenseUnavailable      the organization's license cannot be produced (a server fault)
    └── ProviderUnavailable     the identity provider cannot be reached or answers nonsense

Every error carries a sentence a user can act on.
"""


class DomainError(Exception):
    """Base of every error the domain raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidRequest(DomainError):
    """The request is well-formed but the domain refuses its content."""


class ReviewClosed(InvalidRequest):
    """The review is in a state that accepts no further decisions."""


class UnknownCode(InvalidRequest):
    """A one-time code that is unknown, used or expired (a wrong guess, as far as anyone knows)."""


class Unauthenticated(DomainError):
    """The caller's identity is missing or cannot be verified."""


class ChatUserNotLinked(Unauthenticated):
    """A chat user acted before linking their chat account to a gateway user."""


class ChatEmailUnavailable(ChatUserNotLinked):
    """E-mail matching could not run: the chat service would not say the user's address."""


class Forbidden(DomainError):
    """The caller is known but not allowed to do this."""


class InactiveUser(Forbidden):
    """The user has been set inactive."""


class AdminRequired(Forbidden):
    """Only members of the admin group may do this."""


class SelfApproval(Forbidden):
    """The owner of a review tried to approve it."""


class NotAReviewer(Forbidden):
    """The caller belongs to none of the review's reviewer groups."""


class NotForceApprover(Forbidden):
    """The caller asked to force-approve without being in a force-approval group."""


class OwnerOrAdminRequired(Forbidden):
    """Only the owner of a review or an admin may end an approved review."""


class NotApproved(Forbidden):
    """The session cannot run: its review is not approved, or the access it granted ended."""


class OutsideTimeWindow(Forbidden):
    """The session was executed outside the time window its approval set."""


class NotFound(DomainError):
    """No such resource, or one the caller may not see."""


class TooManyAttempts(DomainError):
    """Too many failed attempts: wait ``retry_after`` seconds."""

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Conflict(DomainError):
    """The resource already exists or clashes with an existing one."""


class UnusableConfiguration(DomainError):
    """The configuration is well-formed, but the plugin cannot run with it."""


class NotConfigured(DomainError):
    """The resource is not configured for what was asked (a sidecar without listeners)."""


class LicenseUnavailable(DomainError):
    """The license cannot be read or signed; the operator must fix the signing key."""


class ProviderUnavailable(DomainError):
    """The identity provider cannot be reached, or answered something unusable."""
