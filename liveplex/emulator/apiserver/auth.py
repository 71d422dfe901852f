"""Authentication: bearer tokens to users, as kube-apiserver's token authenticators do.

Development emulator, not for production. Pure apart from the random source. The admin token (the
one in every kubeconfig the emulator writes) is a member of `system:masters`, which the authorizer
lets do anything, as a cluster's admin credential is. A ServiceAccount's token comes from the
TokenRequest API (`kubectl create token`, and the kubelet for each pod) and authenticates as
`system:serviceaccount:<namespace>:<name>`. A request with a token nobody issued is 401; one with
no token is anonymous, which only reaches the public health and version paths (kube-apiserver
v1.32 with anonymous authentication limited to those endpoints), and is 401 elsewhere.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
ADMIN_USER = "liveplex-emulator-admin"
PUBLIC_PATHS = ("/healthz", "/livez", "/readyz", "/version")
"""What an anonymous request may reach."""
TOKEN_SECONDS = 3600
"""A TokenRequest's default `expirationSeconds` (tokens do not expire in the emulator)."""
MIN_TOKEN_SECONDS, MAX_TOKEN_SECONDS = 10 * 60, 2 ** 32
"""The `expirationSeconds` a TokenRequest may ask for (upstream's ValidateTokenRequest; 422 outside)."""


@dataclass(frozen=True, slots=True)
class User:
    name: str
    groups: tuple[str, ...]

    @property
    def service_account(self) -> tuple[str, str] | None:
        """(namespace, name) for a ServiceAccount's user."""
        parts = self.name.split(":")
        return (parts[2], parts[3]) if len(parts) == 4 and parts[:2] == ["system", "serviceaccount"] else None


ANONYMOUS = User("system:anonymous", ("system:unauthenticated",))


def service_account_user(namespace: str, name: str) -> User:
    return User(f"system:serviceaccount:{namespace}:{name}",
                ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED))


class Tokens:
    """Every token issued so far and whom it authenticates."""

    def __init__(self) -> None:
        self.admin = secrets.token_urlsafe(32)
        self._users: dict[str, User] = {self.admin: User(ADMIN_USER, (MASTERS, AUTHENTICATED))}

    def issue(self, namespace: str, service_account: str) -> str:
        token = secrets.token_urlsafe(32)
        self._users[token] = service_account_user(namespace, service_account)
        return token

    def user(self, authorization: str | None) -> User | None:
        """Who an `Authorization` header names: ANONYMOUS without one, None for a token nobody issued."""
        if not authorization:
            return ANONYMOUS
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer":
            return None
        return self._users.get(token.strip())
