from grepseek_lib.cli import main

raise SystemExit(main())
