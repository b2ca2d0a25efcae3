"""The Streamlit dashboard over run directories (built on `analysis` and `pricing` only)."""
