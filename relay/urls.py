from django.urls import path

from relay import views

urlpatterns = [
    path("notify", views.notify, name="notify"),
]
