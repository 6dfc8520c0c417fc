from django.urls import include, path

from config.urls import urlpatterns as product_urlpatterns

urlpatterns = [path("anymail/", include("anymail.urls")), *product_urlpatterns]
