"""Registers the platform as a client and creates the users: `python -m
tests.accounts.oidc_provider.setup` with OIDC_PROVIDER_SETUP (JSON: client_id, client_secret,
redirect_uri, users [{username, password, groups}])."""

from __future__ import annotations

import json
import os

import django


def main() -> None:
    django.setup()
    from django.contrib.auth.models import Group, User

    spec = json.loads(os.environ["OIDC_PROVIDER_SETUP"])
    if "client_id" in spec:  # else: only the users' groups change, between two logins
        client_create(spec)
    for person in spec["users"]:
        user, _ = User.objects.get_or_create(username=person["username"], email=f"{person['username']}@example.org")
        user.set_password(person["password"])
        user.save()
        user.groups.set([Group.objects.get_or_create(name=name)[0] for name in person["groups"]])


def client_create(spec: dict) -> None:
    from oauth2_provider.models import Application

    Application.objects.create(
        name="costplatform",
        client_id=spec["client_id"],
        client_secret=spec["client_secret"],  # stored hashed
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=spec["redirect_uri"],
        algorithm=Application.RS256_ALGORITHM,
        skip_authorization=True,
    )


if __name__ == "__main__":
    main()
