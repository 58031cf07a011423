from __future__ import annotations

from typing import Any

from oauth2_provider.oauth2_validators import OAuth2Validator


class GroupsValidator(OAuth2Validator):
    """Adds the user's groups and business lines to the ID token and userinfo (scope profile)."""

    oidc_claim_scope = OAuth2Validator.oidc_claim_scope | {"groups": "profile", "business_lines": "profile"}

    def get_additional_claims(self, request: Any) -> dict[str, Any]:
        names = sorted(request.user.groups.values_list("name", flat=True))
        return {
            "email": request.user.email,
            "preferred_username": request.user.username,
            "given_name": request.user.first_name,
            "groups": [name for name in names if not name.startswith("line:")],
            "business_lines": [name.removeprefix("line:") for name in names if name.startswith("line:")],
        }
