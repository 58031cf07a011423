from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from apps.accounts.sso import SsoAuthenticate, SsoCallback
from apps.accounts.views import LoginPage
from apps.metrics.views import metrics
from costplatform import views

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    # Browsers ask for /favicon.ico where a page names no icon (the API's JSON, a download).
    path("favicon.ico", RedirectView.as_view(url=static("common/favicon.svg"), permanent=True)),
    path("metrics", metrics, name="metrics"),
    path("login/", LoginPage.as_view(), name="login"),
    path("oidc/authenticate/", SsoAuthenticate.as_view(), name="oidc_authentication_init"),
    path("oidc/callback/", SsoCallback.as_view(), name="oidc_authentication_callback"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("", include("apps.ledger.urls")),
    path("", include("apps.plans.urls")),
    path("", include("apps.reconciliation.views")),
    path("", include("apps.currencies.views")),
    path("", include("apps.finance.urls")),
    path("", include("apps.audits.urls")),
    path("", include("apps.ingest.urls")),
    path("", include("apps.classification.urls")),
    path("", include("apps.pricing.urls")),
    path("", include("apps.alerts.urls")),
    path("", include("apps.dashboards.urls")),
    path("i18n/", include("django.conf.urls.i18n")),
    path("display-zone/", views.display_zone_set, name="display_zone"),
    path("api/v1/", include("apps.pipeline.urls")),
    path("api/v1/", include("apps.ingest.api.urls")),
    path("api/v1/", include("apps.classification.api.urls")),
    path("api/v1/", include("apps.pricing.api.urls")),
    path("api/v1/", include("apps.ledger.api.urls")),
    path("api/v1/", include("apps.plans.api.urls")),
    path("api/v1/", include("apps.exports.api")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="swagger-ui"),
]

# Under /api/ a JSON 404, as every other API error (tests/hostile fuzzes the schema's answers).
handler404 = "costplatform.views.not_found"
# The site's layout with the reason and a way back (templates/403.html, 500.html).
handler403 = "costplatform.views.permission_denied"
handler500 = "costplatform.views.server_error"
