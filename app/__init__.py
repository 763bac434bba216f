"""The Streamlit capacity-planning app (run `streamlit run app/streamlit_app.py`)."""
