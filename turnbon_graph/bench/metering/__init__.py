"""A search's spend under its budget: what each call is estimated to cost before it is
made and what it cost (`budget`), and the client that books every call (`metered`)."""
