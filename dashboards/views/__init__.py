"""The dashboard's pages: one module per page, each exposing `render(root)`."""
