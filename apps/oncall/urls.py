app_name = "oncall"
urlpatterns = []
