/etc/mptd/
