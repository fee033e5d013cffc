"""The bundled demo: a small project with a real bug, and the script a scripted model follows."""
