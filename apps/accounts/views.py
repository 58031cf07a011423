from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views

from apps.accounts.sso import sso_enabled


class LoginPage(auth_views.LoginView):
    """The login form, with a "Sign in with <provider>" button when single sign-on is on."""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["sso_provider"] = settings.OIDC_PROVIDER_NAME if sso_enabled() else ""
        context["sso_refused"] = self.request.GET.get("sso") == "refused"
        return context
