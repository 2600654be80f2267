from collectors.cli import main

raise SystemExit(main())
