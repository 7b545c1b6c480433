from django.contrib import admin
from django.urls import path

from salon import views

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("admin/", admin.site.urls),
]
